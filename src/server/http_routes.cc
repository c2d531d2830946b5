#include "server/http_routes.h"

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "server/completion_handler.h"
#include "server/openai_format.h"
#include "server/request_log.h"
#include "server/session_cache.h"
#include "server/tokenize_handler.h"
#include "server/web_routes.h"
#include "util/memory_stats.h"

namespace qevict::server {
namespace {

using nlohmann::json;

struct Route {
  const char* path;
  const char* method;
};

// Every path the server answers, with its method (405 for the others).
constexpr Route kRoutes[] = {
    {"/health", "GET"},
    {"/metrics", "GET"},
    {"/v1/models", "GET"},
    {"/v1/chat/completions", "POST"},
    {"/v1/completions", "POST"},
    {"/chat/completions", "POST"},  // for clients whose base URL lacks /v1
    {"/completions", "POST"},
    {"/tokenize", "POST"},  // llama.cpp's
    {"/detokenize", "POST"},
    {"/props", "GET"},  // llama.cpp's: the settings the web page offers
    {"/", "GET"},       // the web page (web_routes.h)
    {"/index.html", "GET"},
};
constexpr const char* kModelPrefix = "/v1/models/";
constexpr const char* kSessionPrefix = "/v1/sessions/";
constexpr const char* kSessionCacheSuffix = "/cache";

const Route* FindRoute(const std::string& path) {
  for (const Route& r : kRoutes) {
    if (path == r.path) return &r;
  }
  static constexpr Route kModel = {kModelPrefix, "GET"};
  if (path.rfind(kModelPrefix, 0) == 0 && path.size() > std::string(kModelPrefix).size()) {
    return &kModel;
  }
  static constexpr Route kSessionCache = {"/v1/sessions/{id}/cache", "GET"};
  const std::string prefix = kSessionPrefix, suffix = kSessionCacheSuffix;
  if (path.size() > prefix.size() + suffix.size() && path.rfind(prefix, 0) == 0 &&
      path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0) {
    return &kSessionCache;
  }
  static constexpr Route kWebAsset = {"/web/{file}", "GET"};
  if (IsWebPath(path)) return &kWebAsset;
  return nullptr;
}

// Label for metrics: the route's path, or "other" (unknown paths must not add label values).
std::string RouteLabel(const std::string& path) {
  const Route* route = FindRoute(path);
  return route == nullptr ? "other" : route->path;
}

void SendJson(httplib::Response& res, const json& body) {
  res.status = 200;
  res.set_content(DumpJson(body), "application/json");
}

// Called for every response with status >= 400: handlers' own errors already have a body; the
// ones the HTTP library made (no route, body too large, bad request line) get an OpenAI error.
httplib::Server::HandlerResponse FillErrorBody(const httplib::Request& req,
                                               httplib::Response& res) {
  if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
  ApiError error = ErrorForStatus(res.status);
  if (res.status == 404) {
    const Route* route = FindRoute(req.path);
    if (route != nullptr && req.method == route->method) {  // the handler found nothing there
      error = NotFound("not found: " + req.method + " " + req.path);
    } else if (route != nullptr) {
      error = MethodNotAllowed("method " + req.method + " is not allowed on " + req.path +
                               "; use " + route->method);
      res.set_header("Allow", route->method);
    } else {
      error = NotFound("unknown route " + req.method + " " + req.path +
                       " (this server has GET /v1/models, POST /v1/chat/completions, POST "
                       "/v1/completions, POST /tokenize, POST /detokenize, GET "
                       "/v1/sessions/{id}/cache, GET /props, GET /health, GET /metrics, and "
                       "its web page at GET /)");
    }
  }
  SendError(res, error);
  return httplib::Server::HandlerResponse::Handled;
}

void SendResult(httplib::Response& res, const std::variant<json, ApiError>& result) {
  if (const auto* error = std::get_if<ApiError>(&result)) return SendError(res, *error);
  SendJson(res, std::get<json>(result));
}

// With --api-key, every route but /health and the web page's files wants "Authorization:
// Bearer KEY" (OpenAI's header); the page asks for the key before it calls the API.
bool Authorized(const httplib::Request& req, const std::string& api_key) {
  if (api_key.empty() || req.path == "/health" || IsWebPath(req.path)) return true;
  const std::string header = req.get_header_value("Authorization");
  const std::string bearer = "Bearer ";
  return header.size() == bearer.size() + api_key.size() && header.rfind(bearer, 0) == 0 &&
         header.compare(bearer.size(), std::string::npos, api_key) == 0;
}

}  // namespace

void InstallRoutes(httplib::Server& http, const ServerContext& ctx, const RouteOptions& options) {
  http.Get("/health", [&ctx](const httplib::Request&, httplib::Response& res) {
    const SchedulerSnapshot s = ctx.scheduler->Snapshot();
    const bool stopping = ctx.scheduler->shutting_down();
    SendJson(res, {{"status", stopping ? "shutting_down" : "ok"},
                   {"model", ctx.model_id},
                   {"slots", s.slots},
                   {"slots_idle", s.slots - s.active},
                   {"queue_length", s.queued}});
    if (stopping) res.status = 503;
  });
  http.Get("/metrics", [&ctx](const httplib::Request&, httplib::Response& res) {
    res.status = 200;
    res.set_content(ctx.metrics->RenderPrometheus(ctx.scheduler->Snapshot(), ReadMemoryStats(),
                                                  ctx.sessions != nullptr
                                                      ? ctx.sessions->Snapshot()
                                                      : SessionStoreSnapshot{}),
                    "text/plain; version=0.0.4");
  });
  http.Get("/v1/models", [&ctx](const httplib::Request&, httplib::Response& res) {
    SendJson(res, ModelList(ctx.model_id, ctx.created));
  });
  http.Get(std::string(kModelPrefix) + "(.+)",
           [&ctx](const httplib::Request& req, httplib::Response& res) {
             const std::string id = req.matches[1];
             if (id != ctx.model_id) {
               return SendError(res, NotFound("the model '" + id +
                                              "' does not exist; this "
                                              "server has '" +
                                              ctx.model_id + "'"));
             }
             SendJson(res, ModelObject(ctx.model_id, ctx.created));
           });
  for (const char* path : {"/v1/chat/completions", "/chat/completions"}) {
    http.Post(path, [&ctx](const httplib::Request& req, httplib::Response& res) {
      HandleCompletion(ctx, Endpoint::kChat, req, res);
    });
  }
  for (const char* path : {"/v1/completions", "/completions"}) {
    http.Post(path, [&ctx](const httplib::Request& req, httplib::Response& res) {
      HandleCompletion(ctx, Endpoint::kCompletion, req, res);
    });
  }

  http.Post("/tokenize", [&ctx](const httplib::Request& req, httplib::Response& res) {
    SendResult(res, TokenizeRequest(*ctx.model->tokenizer, req.body));
  });
  http.Post("/detokenize", [&ctx](const httplib::Request& req, httplib::Response& res) {
    SendResult(res, DetokenizeRequest(*ctx.model->tokenizer, req.body));
  });
  http.Get("/props", [&ctx](const httplib::Request&, httplib::Response& res) {
    SendJson(res, PropsJson(ctx));
  });
  http.Get(std::string(kSessionPrefix) + "([^/]+)" + kSessionCacheSuffix,
           [&ctx](const httplib::Request& req, httplib::Response& res) {
             SendResult(res, SessionCacheReport(ctx, req.matches[1]));
           });
  InstallWebRoutes(http);
  http.set_pre_routing_handler([options](const httplib::Request& req, httplib::Response& res) {
    BeginRequestLog();
    if (Authorized(req, options.api_key)) return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("WWW-Authenticate", "Bearer");
    SendError(res, Unauthorized("invalid or missing API key: send the header "
                                "'Authorization: Bearer <key>' with the server's --api-key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  http.set_error_handler(httplib::Server::HandlerWithResponse(FillErrorBody));
  http.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        res.body.clear();
        SendError(res, InternalError("internal error: " + what));
      });
  http.set_logger([&ctx, options](const httplib::Request& req, const httplib::Response& res) {
    ctx.metrics->CountResponse(RouteLabel(req.path), res.status);
    if (options.log_requests) {
      const std::string line = FormatRequestLogLine(
          req.method, req.path, res.status, CurrentRequestLog(), RequestLogEntry::Clock::now());
      std::fprintf(stderr, "%s\n", line.c_str());
    }
    CurrentRequestLog() = RequestLogEntry{};  // a request the router never sees starts empty
  });
}

}  // namespace qevict::server
