#include "server/web_routes.h"

#include <string_view>

#include "server/web_assets.h"

namespace qevict::server {
namespace {

constexpr std::string_view kAssetPrefix = "/web/";

const WebAsset* FindAsset(std::string_view name) {
  for (const WebAsset& asset : WebAssets()) {
    if (asset.name == name) return &asset;
  }
  return nullptr;
}

// The bytes change only with the binary: a browser keeps them but asks again each time
// (no-cache), and the ETag answers that question with a 304 and no body.
void SendAsset(const WebAsset& asset, const httplib::Request& req, httplib::Response& res) {
  res.set_header("Cache-Control", "no-cache");
  res.set_header("ETag", std::string(asset.etag));
  res.set_header("X-Content-Type-Options", "nosniff");
  if (req.get_header_value("If-None-Match") == asset.etag) {
    res.status = 304;
    return;
  }
  res.status = 200;
  res.set_content(asset.bytes.data(), asset.bytes.size(), std::string(asset.content_type).c_str());
}

}  // namespace

bool IsWebPath(const std::string& path) {
  return path == "/" || path == "/index.html" || path.rfind(kAssetPrefix, 0) == 0;
}

void InstallWebRoutes(httplib::Server& http) {
  for (const char* path : {"/", "/index.html"}) {
    http.Get(path, [](const httplib::Request& req, httplib::Response& res) {
      const WebAsset* index = FindAsset("index.html");
      if (index == nullptr) {
        res.status = 404;  // no page was built in (an empty web/): the error handler says so
        return;
      }
      SendAsset(*index, req, res);
    });
  }
  http.Get(std::string(kAssetPrefix) + "([A-Za-z0-9_.-]+)",
           [](const httplib::Request& req, httplib::Response& res) {
             const WebAsset* asset = FindAsset(std::string(req.matches[1]));
             if (asset == nullptr) {
               res.status = 404;
               return;
             }
             SendAsset(*asset, req, res);
           });
}

}  // namespace qevict::server
