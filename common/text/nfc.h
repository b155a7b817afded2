#pragma once
// Unicode NFC, the normalizer of the Qwen tokenizers.
#include <string>
#include <string_view>

namespace specd::text {

// `text` (valid UTF-8) in NFC. Text that NFC cannot change, which is all ASCII and nearly all
// real text, comes back as `text` itself without a copy; otherwise the result lives in
// `storage`.
std::string_view ToNfc(std::string_view text, std::string& storage);

}  // namespace specd::text
