// C++ exceptions thrown through frames that allocate, static destructors and
// atexit handlers that allocate during exit.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

static long thrown, caught;

struct Holder {
    std::vector<std::string> items;
    ~Holder() {
        // Allocates while unwinding (and at exit for the static one).
        std::string tail(200, 'x');
        items.push_back(tail);
    }
};

__attribute__((noinline)) static void thrower(int depth, int at) {
    Holder h;
    h.items.emplace_back(std::string(100 + depth, 'a'));
    auto owned = std::make_unique<std::vector<int>>(50 + depth);
    if (depth == at) {
        thrown++;
        throw std::runtime_error(std::string("deep failure at ") + std::to_string(depth));
    }
    thrower(depth + 1, at);
}

static Holder static_holder;
static std::map<int, std::string> *registry;

static void atexit_handler() {
    // Allocate and free plenty during exit.
    std::vector<std::unique_ptr<std::string>> v;
    for (int i = 0; i < 2000; i++)
        v.emplace_back(new std::string(64 + i % 300, 'z'));
    registry->clear();
    delete registry;
    std::printf("atexit handler ran %zu\n", v.size());
    std::fflush(stdout);
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? std::atoi(argv[1]) : 2000;
    registry = new std::map<int, std::string>();
    std::atexit(atexit_handler);
    for (int r = 0; r < rounds; r++) {
        try {
            thrower(0, 3 + r % 60);
        } catch (const std::exception &e) {
            if (std::strncmp(e.what(), "deep failure", 12) == 0)
                caught++;
            (*registry)[r % 100] = e.what();
        }
    }
    static_holder.items.emplace_back("static");
    std::printf("thrown %ld caught %ld\n", thrown, caught);
    return 0;
}
