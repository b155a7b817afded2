#pragma once
// UTF-8 rules the tokenizer needs at its edges: encoded text must be valid, and decoded bytes
// (which BPE tokens may split mid-character) are repaired the way HF tokenizers and the
// WHATWG TextDecoder do, one U+FFFD per maximal invalid subsequence.
#include <cstddef>
#include <string>
#include <string_view>

namespace specd::text {

// The byte offset of the first invalid UTF-8 sequence in `text`, or npos when it is valid.
size_t FindInvalidUtf8(std::string_view text);

// Appends `bytes` to `out` with each invalid or truncated sequence replaced by U+FFFD.
void AppendUtf8Lossy(std::string_view bytes, std::string& out);

// Like AppendUtf8Lossy, but stops before a trailing sequence that is incomplete yet could still
// become valid, and returns how many bytes it consumed; the caller keeps the rest for later.
size_t AppendCompleteUtf8Lossy(std::string_view bytes, std::string& out);

// The code point that ends at `end` in valid UTF-8 `text` (end > 0), and its start offset.
char32_t CodePointBefore(std::string_view text, size_t end, size_t* start);

// The code point that starts at `pos` in valid UTF-8 `text`, and its length in bytes.
char32_t CodePointAt(std::string_view text, size_t pos, size_t* length);

}  // namespace specd::text
