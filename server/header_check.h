// A request's head (its request line and field lines) checked as its bytes arrive, more
// strictly than cpp-httplib parses it, as RFC 9112 asks of a server: lenient parsing of field
// lines is where request smuggling starts, and an unbounded head costs memory per connection.
//
// Refused with 400: a field line without a colon, an empty field name, a name with a character
// outside RFC 9110's token set (whitespace before the colon included), and obsolete line
// folding (a line beginning with a space or tab). Refused with 431: more than kMostFieldLines
// field lines, or a head longer than kMostHeadBytes. The request line is left to the library.
// Lines end with CRLF or a bare LF.
//
// Thread safety: none; one per connection.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace hlocache::server {

class HeaderCheck {
 public:
  static constexpr size_t kMostFieldLines = 100;
  static constexpr size_t kMostHeadBytes = 64 * 1024;

  struct Refusal {
    int status;          // 400 or 431.
    std::string reason;  // One line.
  };

  // A new request's head follows.
  void Reset();
  // The next bytes of the request, in order. A refusal at the first fault; nothing once the
  // empty line that ends the head has arrived (what follows is the body, not checked here).
  std::optional<Refusal> Feed(std::string_view bytes);
  bool done() const { return done_; }

 private:
  std::optional<Refusal> CheckLine(std::string_view line);

  std::string line_;  // The line being read, without its end.
  size_t lines_ = 0;  // Lines ended so far, the request line included.
  size_t head_bytes_ = 0;
  bool done_ = false;
  bool refused_ = false;
};

}  // namespace hlocache::server
