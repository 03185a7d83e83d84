// A C++ library loaded after an attach: plugin_make(n) keeps n objects of
// 1 KiB made with new (its allocations must be profiled once it loads).
#include <memory>
#include <vector>

struct Kilobyte {
    char bytes[1024];
};

static std::vector<std::unique_ptr<Kilobyte>> kept;

extern "C" __attribute__((noinline)) long plugin_make(int n) {
    for (int i = 0; i < n; i++) {
        kept.push_back(std::unique_ptr<Kilobyte>(new Kilobyte()));
        kept.back()->bytes[0] = static_cast<char>(i);
    }
    return static_cast<long>(kept.size());
}
