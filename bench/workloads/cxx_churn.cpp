// cxx_churn: C++ container churn (std::map, std::string, std::vector).
//
//   cxx_churn ROUNDS [THREADS]
//
// Each round builds a std::map from heap-allocated (non-SSO) string keys to
// vectors of varying length, rewrites and erases part of it, sorts a vector
// of strings, and drops everything.  With THREADS > 1, that many threads each
// run ROUNDS rounds at once (the threaded C++ workload).  Prints a checksum.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

static unsigned long long one_round(unsigned seed) {
    std::map<std::string, std::vector<int>> m;
    std::vector<std::string> words;
    unsigned x = seed;
    for (int i = 0; i < 2000; i++) {
        x = x * 1103515245u + 12345u;
        std::string key = "a-fairly-long-key-prefix/" + std::to_string(x % 5000);
        std::vector<int> &v = m[key];
        v.resize(1 + x % 48, static_cast<int>(i));
        words.push_back(key + "#" + std::to_string(i));
    }
    for (auto it = m.begin(); it != m.end();) {
        if (it->second.size() % 3 == 0) {
            it = m.erase(it);
        } else {
            it->second.push_back(static_cast<int>(it->first.size()));
            ++it;
        }
    }
    std::sort(words.begin(), words.end());
    unsigned long long sum = m.size();
    for (const auto &w : words) sum += w.size();
    return sum;
}

static unsigned long long run_rounds(long rounds, unsigned first_seed) {
    unsigned long long sum = 0;
    for (long r = 0; r < rounds; r++) sum += one_round(first_seed + static_cast<unsigned>(r));
    return sum;
}

int main(int argc, char **argv) {
    long rounds = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 100;
    long threads = argc > 2 ? std::strtol(argv[2], nullptr, 10) : 1;
    if (threads <= 1) {
        std::printf("rounds=%ld checksum=%llu\n", rounds, run_rounds(rounds, 1));
        return 0;
    }
    std::vector<unsigned long long> sums(threads);
    std::vector<std::thread> workers;
    for (long t = 0; t < threads; t++)
        workers.emplace_back([&sums, t, rounds] {
            sums[t] = run_rounds(rounds, 1 + static_cast<unsigned>(t * rounds));
        });
    unsigned long long sum = 0;
    for (long t = 0; t < threads; t++) {
        workers[t].join();
        sum += sums[t];
    }
    std::printf("rounds=%ld threads=%ld checksum=%llu\n", rounds, threads, sum);
    return 0;
}
