// A C++ library whose function throws across the library boundary.
#include <stdexcept>
#include <string>

extern "C" int thrower_call(int x);

int thrower_call(int x) {
    if (x > 0) throw std::runtime_error("thrown " + std::to_string(x));
    return -x;
}
