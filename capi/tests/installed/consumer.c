/* A program outside the tree that links the installed C library (capi/tests/installed/):
 * writes PATH with 1,000 samples of main -> work -> leaf on two threads (zstd), reads it
 * back with the library's reader and prints what it read. Exit status 0 when the reading
 * matches the writing. */
#include <stdio.h>
#include <string.h>
#include <tachyon.h>

#define CHECK(call)                                                                    \
    do {                                                                               \
        int32_t status_ = (call);                                                      \
        if (status_ < 0) {                                                             \
            fprintf(stderr, "%s: %s\n", #call, tachyon_status_message(status_));       \
            return 1;                                                                  \
        }                                                                              \
    } while (0)

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: consumer PATH\n");
        return 2;
    }
    tachyon_writer_options options;
    CHECK(tachyon_writer_options_init(&options));
    options.compression = TACHYON_COMPRESSION_ZSTD;
    options.sample_interval_us = 1000;
    tachyon_writer *writer;
    CHECK(tachyon_writer_open_file(argv[1], &options, &writer));
    tachyon_frame stack[3] = {
        {"consumer.c", TACHYON_NUL_TERMINATED, "leaf", TACHYON_NUL_TERMINATED, 30, 30, -1, -1, TACHYON_NO_OPCODE},
        {"consumer.c", TACHYON_NUL_TERMINATED, "work", TACHYON_NUL_TERMINATED, 20, 20, -1, -1, TACHYON_NO_OPCODE},
        {"consumer.c", TACHYON_NUL_TERMINATED, "main", TACHYON_NUL_TERMINATED, 10, 10, -1, -1, TACHYON_NO_OPCODE},
    };
    for (uint64_t i = 0; i < 1000; i++) {
        /* 600 samples in leaf, 400 in work; threads 1 and 2 alternate. */
        size_t skip = i % 5 < 3 ? 0 : 1;
        CHECK(tachyon_writer_write_sample(writer, 1000 * i, 0, 1 + i % 2, 0, stack + skip, 3 - skip));
    }
    CHECK(tachyon_writer_finalize(writer, NULL));
    CHECK(tachyon_writer_close(writer));

    tachyon_reader *reader;
    CHECK(tachyon_reader_open_file(argv[1], &reader));
    tachyon_info info;
    CHECK(tachyon_reader_info(reader, &info));
    uint64_t samples = 0, in_leaf = 0;
    tachyon_sample sample;
    int32_t status;
    while ((status = tachyon_reader_next_sample(reader, &sample)) == TACHYON_OK) {
        tachyon_frame innermost;
        CHECK(tachyon_reader_frame(reader, sample.frame_ids[0], &innermost));
        samples++;
        in_leaf += innermost.funcname_len == 4 && memcmp(innermost.funcname, "leaf", 4) == 0;
    }
    CHECK(status);
    CHECK(tachyon_reader_close(reader));
    printf("%llu samples, %llu in leaf, %u threads\n", (unsigned long long)samples, (unsigned long long)in_leaf,
           info.thread_count);
    return samples == 1000 && info.sample_count == 1000 && in_leaf == 600 && info.thread_count == 2 ? 0 : 1;
}
