#include "spread/util/bounded_message.h"

namespace spread {

std::string bounded_message(const std::string& message, size_t limit) {
  if (message.size() <= limit) return message;
  const auto continuation = [&](size_t i) { return (static_cast<unsigned char>(message[i]) & 0xC0) == 0x80; };
  size_t head = limit * 2 / 3, tail_begin = message.size() - (limit - head);
  while (head > 0 && continuation(head)) --head;
  while (tail_begin < message.size() && continuation(tail_begin)) ++tail_begin;
  return message.substr(0, head) + " [... " + std::to_string(tail_begin - head) + " bytes left out ...] " +
         message.substr(tail_begin);
}

}  // namespace spread
