// The web page at / (docs/server.md, "The web page"): index.html at /, the other files of web/
// at /web/NAME, served from the bytes compiled into the binary (web_assets.h).
#pragma once

#include <httplib.h>

#include <string>

namespace qevict::server {

void InstallWebRoutes(httplib::Server& http);

// The page's own paths, which need no API key: the page holds no data, and asks for the key
// before it calls the API.
bool IsWebPath(const std::string& path);

}  // namespace qevict::server
