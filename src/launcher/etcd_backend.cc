#include "launcher/etcd_backend.h"

#include "cohort/errors.h"
#include "launcher/http_client.h"
#include "launcher/json_text.h"

namespace cohort::launcher {
namespace {

std::string b64(const std::string& s) {
  return json_quote(base64_encode(s));
}

std::string etcd_key(const std::string& key) {
  return "/cohort/" + key;
}

}  // namespace

EtcdBackend::EtcdBackend(const std::string& endpoint, std::chrono::milliseconds timeout) : timeout_(timeout) {
  std::string ep = endpoint;
  for (const char* scheme : {"http://", "etcd://"})
    if (ep.rfind(scheme, 0) == 0) ep = ep.substr(std::char_traits<char>::length(scheme));
  split_endpoint(ep, 2379, &host_, &port_);
}

std::string EtcdBackend::call(const std::string& path, const std::string& body) {
  // One request is short; the join timeout bounds the rendezvous, not this.
  HttpResponse r = http_post(host_, port_, path, body, std::min(timeout_, std::chrono::milliseconds(30000)));
  if (r.status != 200) {
    throw StoreError("etcd at " + describe() + " answered " + path + " with HTTP " +
                     std::to_string(r.status) + ": " + r.body.substr(0, 300));
  }
  return r.body;
}

std::optional<std::string> EtcdBackend::get(const std::string& key) {
  std::string reply = call("/v3/kv/range", "{\"key\": " + b64(etcd_key(key)) + "}");
  auto value = json_string_field(reply, "value");
  if (!value) return json_has_field(reply, "kvs") ? std::optional<std::string>("") : std::nullopt;
  return base64_decode(*value);
}

void EtcdBackend::set(const std::string& key, const std::string& value) {
  call("/v3/kv/put", "{\"key\": " + b64(etcd_key(key)) + ", \"value\": " + b64(value) + "}");
}

bool EtcdBackend::compare_set(const std::string& key, const std::optional<std::string>& expected,
                              const std::string& desired, std::optional<std::string>* current) {
  const std::string k = b64(etcd_key(key));
  // "Absent" is a create revision of 0, as etcd's own docs compare it.
  std::string compare =
      expected ? "{\"key\": " + k +
                     ", \"result\": \"EQUAL\", \"target\": \"VALUE\", \"value\": " + b64(*expected) + "}"
               : "{\"key\": " + k +
                     ", \"result\": \"EQUAL\", \"target\": \"CREATE\", "
                     "\"create_revision\": \"0\"}";
  std::string body = "{\"compare\": [" + compare + "], \"success\": [{\"request_put\": {\"key\": " + k +
                     ", \"value\": " + b64(desired) +
                     "}}], \"failure\": [{\"request_range\": {\"key\": " + k + "}}]}";
  std::string reply = call("/v3/kv/txn", body);
  // etcd leaves false booleans out of its JSON.
  const bool succeeded = json_field_is_true(reply, "succeeded");
  std::optional<std::string> now;
  if (succeeded) {
    now = desired;
  } else if (auto v = json_string_field(reply, "value")) {
    now = base64_decode(*v);
  }
  if (current) *current = now;
  return now == desired;
}

std::string EtcdBackend::describe() const {
  return "etcd at " + host_ + ":" + std::to_string(port_);
}

}  // namespace cohort::launcher
