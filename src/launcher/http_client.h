// http_client.h: one HTTP/1.1 POST over a plain TCP connection, enough to
// talk to etcd's JSON gateway without a new library.
#pragma once

#include <chrono>
#include <string>

namespace cohort::launcher {

struct HttpResponse {
  int status = 0;
  std::string body;
};

// http_post sends `body` (JSON) to http://host:port/path and returns the
// reply; throws NetworkError naming the address when it cannot connect or
// the reply is malformed, TimeoutError after `timeout`.
HttpResponse http_post(const std::string& host, int port, const std::string& path, const std::string& body,
                       std::chrono::milliseconds timeout);

// base64_encode and base64_decode: etcd's keys and values in JSON.
std::string base64_encode(const std::string& bytes);
std::string base64_decode(const std::string& text);

}  // namespace cohort::launcher
