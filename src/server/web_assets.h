// The web page's files (web/*.html, *.js, *.css), compiled into the binary by
// cmake/embed_web.cmake so that `qevict serve` serves them from any working directory.
#pragma once

#include <span>
#include <string_view>

namespace qevict::server {

struct WebAsset {
  std::string_view name;          // file name under web/, e.g. "app.js"
  std::string_view content_type;  // from the extension
  std::string_view etag;          // quoted, from the file's SHA-1
  std::string_view bytes;
};

std::span<const WebAsset> WebAssets();  // generated: build/generated/web_assets_data.cc

}  // namespace qevict::server
