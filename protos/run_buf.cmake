# Runs buf on the contract for a ctest check:
#   cmake -DBUF=<path to buf> -DARGS=<;-separated arguments> -P run_buf.cmake
# from protos/ (the buf module root). Fails with a pointer to the set-up script when buf is missing.
list(JOIN ARGS " " command)
if(NOT EXISTS "${BUF}")
  message(FATAL_ERROR
    "buf not found at ${BUF}: run scripts/setup.sh, which installs it (npm package @bufbuild/buf "
    "into tools/).")
endif()
execute_process(COMMAND "${BUF}" ${ARGS} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  if(ARGS MATCHES "^format")
    set(hint "`buf format -w` in protos/ rewrites the files as buf wants them")
  else()
    set(hint "the findings above name file:line:column")
  endif()
  message(FATAL_ERROR "`buf ${command}` failed (exit ${rc}); ${hint}.")
endif()
