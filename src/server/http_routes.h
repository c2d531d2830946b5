// The HTTP surface: routes, JSON errors for everything the HTTP library rejects on its own
// (unknown route 404, wrong method 405, body too large 413, malformed request 400), an
// exception guard (500), and per-response metrics.
#pragma once

#include <httplib.h>

#include "server/server_context.h"

namespace qevict::server {

struct RouteOptions {
  bool log_requests = false;  // one line per response on stderr
  std::string api_key;        // "" : no authentication
};

void InstallRoutes(httplib::Server& http, const ServerContext& context,
                   const RouteOptions& options);

}  // namespace qevict::server
