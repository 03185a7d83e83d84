// A C++ service leaking through the standard library under two of its own
// functions, for the program-frame tests: svc::Ledger::record keeps a
// std::string in a std::map per call (the allocations are made in
// std::__cxx11::basic_string's and std::_Rb_tree's code), svc::Archive::keep
// a std::make_unique'd Entry in a vector. Each of ROUNDS rounds records 200
// entries and keeps 100, then writes a dump (heapsample_dump, found with
// dlsym); at exit everything is freed, so the exit dump holds no leak.
#include <dlfcn.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#define NOINLINE __attribute__((noinline))

static const int ROUNDS = 8;

namespace svc {
struct Entry {
    char payload[512];
};

struct Ledger {
    std::map<long, std::string> entries;
    NOINLINE void record(long id) { entries[id] = std::string(300 + id % 7, 'x'); }
};

struct Archive {
    std::vector<std::unique_ptr<Entry>> kept;
    NOINLINE void keep() { kept.push_back(std::make_unique<Entry>()); }
};
}  // namespace svc

int main() {
    typedef int (*dump_fn)(const char *);
    dump_fn dump = reinterpret_cast<dump_fn>(dlsym(RTLD_DEFAULT, "heapsample_dump"));
    auto *ledger = new svc::Ledger;
    auto *archive = new svc::Archive;
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < 200; i++) {
            ledger->record(round * 200 + i);
            if (i % 2 == 0) archive->keep();
        }
        usleep(2000);
        if (dump) dump(nullptr);
    }
    delete ledger;
    delete archive;
    return 0;
}
