// cxx_churn: C++ container churn (std::map, std::string, std::vector).
//
//   cxx_churn ROUNDS
//
// Each round builds a std::map from heap-allocated (non-SSO) string keys to
// vectors of varying length, rewrites and erases part of it, sorts a vector
// of strings, and drops everything.  Prints a checksum.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
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

int main(int argc, char **argv) {
    long rounds = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 100;
    unsigned long long sum = 0;
    for (long r = 0; r < rounds; r++) sum += one_round(static_cast<unsigned>(r) + 1);
    std::printf("rounds=%ld checksum=%llu\n", rounds, sum);
    return 0;
}
