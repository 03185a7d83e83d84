// A C++ program to attach to: four threads allocate hard (maps, strings,
// new/delete) and check every result, driven by standard input:
//   start        the threads begin their rounds
//   stop         they finish the round, and each prints whether every
//                result was right ("thread N ok")
//   plugin PATH  dlopen PATH and call its plugin_make(1000)
//   end          exit 0
// The output is the same with or without attaches.
#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

static std::atomic<bool> running{false};
static std::atomic<bool> quit{false};

struct Node {
    long value;
    std::string name;
};

// One round: returns true if every result was as computed by arithmetic.
__attribute__((noinline)) static bool round_of_work(int thread, long round) {
    std::map<int, std::string> table;
    long expected_length = 0;
    for (int i = 0; i < 200; i++) {
        int length = 1 + (i * 37 + thread * 11 + static_cast<int>(round % 97)) % 300;
        table[i] = std::string(static_cast<size_t>(length), static_cast<char>('a' + i % 26));
        expected_length += length;
    }
    for (int i = 0; i < 200; i += 2) {
        expected_length -= static_cast<long>(table[i].size());
        table.erase(i);
    }
    long length = 0;
    for (auto &entry : table) length += static_cast<long>(entry.second.size());
    std::vector<std::unique_ptr<Node>> nodes;
    for (int i = 0; i < 64; i++) nodes.push_back(std::make_unique<Node>(Node{i * round, std::to_string(i)}));
    long sum = 0;
    for (auto &node : nodes) sum += node->value;
    char *block = new char[1000 + round % 5000];
    block[0] = 1;
    delete[] block;
    return length == expected_length && sum == 2016 * round;
}

static void worker(int thread, bool *ok) {
    long round = 0;
    while (!quit.load()) {
        if (!running.load()) {
            std::this_thread::yield();
            continue;
        }
        if (!round_of_work(thread, round++)) *ok = false;
    }
}

int main() {
    bool ok[4] = {true, true, true, true};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; t++) threads.emplace_back(worker, t, &ok[t]);
    std::string line;
    while (std::getline(std::cin, line)) {
        if (line == "start") {
            running = true;
            std::cout << "started" << std::endl;
        } else if (line == "stop") {
            running = false;
            quit = true;
            for (auto &thread : threads) thread.join();
            for (int t = 0; t < 4; t++) std::cout << "thread " << t << (ok[t] ? " ok" : " FAILED") << "\n";
            std::cout << "stopped" << std::endl;
        } else if (line.rfind("plugin ", 0) == 0) {
            void *plugin = dlopen(line.substr(7).c_str(), RTLD_NOW);
            if (!plugin) {
                std::cout << "plugin: " << dlerror() << std::endl;
                continue;
            }
            auto make = reinterpret_cast<long (*)(int)>(dlsym(plugin, "plugin_make"));
            std::cout << "plugin " << make(1000) << std::endl;
        } else if (line == "end") {
            std::cout << "end" << std::endl;
            return 0;
        }
    }
    return 1;
}
