// libFuzzer target for the TcpStore protocol decoders: whatever bytes a
// client or server sends, decoding must neither crash, nor read out of
// bounds, nor allocate beyond the limits. scripts/test runs it for a
// bounded time (COHORT_FUZZ_SECONDS).
#include <cstddef>
#include <cstdint>

#include "store/wire_protocol.h"

using namespace cohort;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const wire::Limits limits{4096, 1 << 20};
  // As the server sees a connection after the hello: a stream of frames.
  size_t pos = 0;
  while (pos < size) {
    auto len = wire::frame_length(data + pos, size - pos, limits);
    if (!len.ok() || !len.value()) break;
    size_t body = static_cast<size_t>(*len.value());
    if (size - pos - wire::kFrameHeaderBytes < body) break;
    auto request = wire::decode_request(data + pos + wire::kFrameHeaderBytes, body, limits);
    if (request.ok()) {
      // Re-encoding what was decoded must give back the same bytes.
      std::vector<uint8_t> again;
      wire::encode_request(request.value(), &again);
      if (again.size() != body + wire::kFrameHeaderBytes ||
          !std::equal(again.begin(), again.end(), data + pos)) {
        __builtin_trap();
      }
    }
    pos += wire::kFrameHeaderBytes + body;
  }
  // As a client sees replies, for every kind of request.
  for (uint8_t op = 1; op <= 12; ++op) {
    (void)wire::decode_reply(static_cast<wire::Op>(op), data, size, limits);
  }
  // The fixed-size hellos.
  if (size >= wire::kServerHelloBytes) (void)wire::decode_server_hello(data);
  if (size >= wire::kClientHelloBytes) (void)wire::decode_client_hello(data);
  return 0;
}
