// Catches the exception thrown inside libthrower; exit code 0 only if unwinding worked.
#include <cstdio>
#include <cstring>
#include <stdexcept>

extern "C" int thrower_call(int x);

int main() {
    try {
        thrower_call(3);
    } catch (const std::runtime_error &e) {
        std::printf("caught %s\n", e.what());
        return std::strcmp(e.what(), "thrown 3") == 0 ? 0 : 2;
    }
    return 1;
}
