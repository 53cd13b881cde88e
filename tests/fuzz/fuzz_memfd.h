/*
 * fuzz_memfd.h - an input as a file for the readers that take a descriptor
 * (the safetensors reader, voice profiles): a memfd holding the bytes,
 * positioned at 0, or -1 when one cannot be made (the input is skipped).
 */
#ifndef QTTS_FUZZ_MEMFD_H
#define QTTS_FUZZ_MEMFD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

static inline int fuzz_memfd(const char *name, const uint8_t *data, size_t size) {
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0) return -1;
    for (size_t off = 0; off < size;) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0) {
            close(fd);
            return -1;
        }
        off += (size_t)w;
    }
    if (lseek(fd, 0, SEEK_SET) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

#endif
