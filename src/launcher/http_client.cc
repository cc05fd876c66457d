#include "launcher/http_client.h"

#include <cctype>
#include <cstdlib>
#include <cstring>

#include "cohort/errors.h"
#include "common/socket.h"

namespace cohort::launcher {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// decode_chunked undoes Transfer-Encoding: chunked.
std::string decode_chunked(const std::string& body, const std::string& where) {
  std::string out;
  size_t at = 0;
  for (;;) {
    size_t eol = body.find("\r\n", at);
    if (eol == std::string::npos) throw NetworkError("malformed chunked reply from " + where);
    size_t size = std::strtoul(body.substr(at, eol - at).c_str(), nullptr, 16);
    if (size == 0) return out;
    if (eol + 2 + size > body.size()) throw NetworkError("truncated chunked reply from " + where);
    out += body.substr(eol + 2, size);
    at = eol + 2 + size + 2;
  }
}

}  // namespace

std::string base64_encode(const std::string& bytes) {
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    unsigned v = (static_cast<unsigned char>(bytes[i]) << 16) |
                 (static_cast<unsigned char>(bytes[i + 1]) << 8) | static_cast<unsigned char>(bytes[i + 2]);
    out += {kAlphabet[v >> 18], kAlphabet[(v >> 12) & 63], kAlphabet[(v >> 6) & 63], kAlphabet[v & 63]};
  }
  if (i + 1 == bytes.size()) {
    unsigned v = static_cast<unsigned char>(bytes[i]) << 16;
    out += {kAlphabet[v >> 18], kAlphabet[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == bytes.size()) {
    unsigned v =
        (static_cast<unsigned char>(bytes[i]) << 16) | (static_cast<unsigned char>(bytes[i + 1]) << 8);
    out += {kAlphabet[v >> 18], kAlphabet[(v >> 12) & 63], kAlphabet[(v >> 6) & 63], '='};
  }
  return out;
}

std::string base64_decode(const std::string& text) {
  std::string out;
  unsigned acc = 0;
  int bits = 0;
  for (char c : text) {
    const char* p = c ? std::strchr(kAlphabet, c) : nullptr;
    if (!p) continue;  // '=' padding and anything else
    acc = (acc << 6) | static_cast<unsigned>(p - kAlphabet);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  return out;
}

HttpResponse http_post(const std::string& host, int port, const std::string& path, const std::string& body,
                       std::chrono::milliseconds timeout) {
  const std::string where = "http://" + format_address(host, static_cast<uint16_t>(port)) + path;
  Deadline deadline = Deadline::after(timeout);
  Socket sock = connect_tcp(host, static_cast<uint16_t>(port), deadline).value_or_throw();
  std::string request =
      "POST " + path + " HTTP/1.1\r\nHost: " + format_address(host, static_cast<uint16_t>(port)) +
      "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\nConnection: close\r\n\r\n" + body;
  throw_if_error(send_all(sock.fd(), request.data(), request.size(), deadline));
  std::string reply;
  char buf[16384];
  for (;;) {
    auto n = recv_some(sock.fd(), buf, sizeof buf, deadline);
    if (!n.ok()) {
      if (n.status().code() == StatusCode::kNetworkError) break;  // closed: the reply is complete
      throw_status(n.status().with_context(where));
    }
    reply.append(buf, n.value());
  }
  HttpResponse out;
  size_t head_end = reply.find("\r\n\r\n");
  if (reply.compare(0, 5, "HTTP/") != 0 || head_end == std::string::npos)
    throw NetworkError("malformed HTTP reply from " + where);
  out.status = std::atoi(reply.c_str() + reply.find(' ') + 1);
  std::string head = reply.substr(0, head_end);
  for (auto& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  out.body = reply.substr(head_end + 4);
  if (head.find("transfer-encoding: chunked") != std::string::npos)
    out.body = decode_chunked(out.body, where);
  return out;
}

}  // namespace cohort::launcher
