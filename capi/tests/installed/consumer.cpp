// The C++ consumer of the installed library (capi/tests/installed/): the same profile as
// consumer.c, written through RAII owners and std::string names by a std::thread per
// thread id (each writer call under one lock: a handle is used by one thread at a time),
// then read back.
#include <tachyon.h>

#include <cstdio>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

void check(int32_t status, const char *what) {
    if (status < 0) throw std::runtime_error(std::string(what) + ": " + tachyon_status_message(status));
}

struct WriterClose {
    void operator()(tachyon_writer *w) const { tachyon_writer_close(w); }
};
struct ReaderClose {
    void operator()(tachyon_reader *r) const { tachyon_reader_close(r); }
};

tachyon_frame frame(const std::string &file, const std::string &name, int32_t line) {
    return tachyon_frame{file.data(), file.size(), name.data(), name.size(), line, line, -1, -1, TACHYON_NO_OPCODE};
}

}  // namespace

int main(int argc, char **argv) try {
    if (argc != 2) {
        std::fprintf(stderr, "usage: consumer_cpp PATH\n");
        return 2;
    }
    tachyon_writer_options options;
    check(tachyon_writer_options_init(&options), "options");
    options.compression = TACHYON_COMPRESSION_ZSTD;
    options.sample_interval_us = 1000;
    tachyon_writer *raw = nullptr;
    check(tachyon_writer_open_file(argv[1], &options, &raw), "open");
    std::unique_ptr<tachyon_writer, WriterClose> writer(raw);

    const std::string file = "consumer.cpp", leaf = "leaf", work = "work", main_ = "main";
    const std::vector<tachyon_frame> stack = {frame(file, leaf, 30), frame(file, work, 20), frame(file, main_, 10)};
    std::mutex lock;
    std::vector<std::thread> threads;
    for (uint64_t tid = 1; tid <= 2; tid++) {
        threads.emplace_back([&, tid] {
            for (uint64_t i = tid - 1; i < 1000; i += 2) {
                size_t skip = i % 5 < 3 ? 0 : 1;
                std::lock_guard<std::mutex> held(lock);
                check(tachyon_writer_write_sample(writer.get(), 1000 * i, 0, tid, 0, stack.data() + skip, 3 - skip),
                      "write_sample");
            }
        });
    }
    for (auto &t : threads) t.join();
    check(tachyon_writer_finalize(writer.get(), nullptr), "finalize");
    writer.reset();

    tachyon_reader *r = nullptr;
    check(tachyon_reader_open_file(argv[1], &r), "open for reading");
    std::unique_ptr<tachyon_reader, ReaderClose> reader(r);
    tachyon_info info;
    check(tachyon_reader_info(reader.get(), &info), "info");
    uint64_t samples = 0, in_leaf = 0;
    tachyon_sample sample;
    int32_t status;
    while ((status = tachyon_reader_next_sample(reader.get(), &sample)) == TACHYON_OK) {
        tachyon_frame innermost;
        check(tachyon_reader_frame(reader.get(), sample.frame_ids[0], &innermost), "frame");
        samples++;
        in_leaf += std::string(innermost.funcname, innermost.funcname_len) == leaf;
    }
    check(status, "next_sample");
    std::printf("%llu samples, %llu in leaf, %u threads\n", static_cast<unsigned long long>(samples),
                static_cast<unsigned long long>(in_leaf), info.thread_count);
    return samples == 1000 && info.sample_count == 1000 && in_leaf == 600 && info.thread_count == 2 ? 0 : 1;
} catch (const std::exception &e) {
    std::fprintf(stderr, "consumer_cpp: %s\n", e.what());
    return 1;
}
