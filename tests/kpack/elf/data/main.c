/* An executable linked against libdemo.so.1; prints and returns a known value (exit 7).
 * With the single argument "phdrs" it prints its own program headers instead. */
#define _GNU_SOURCE
#include <link.h>
#include <stdio.h>
#include <string.h>

int demo_answer(int x);
extern const char *demo_name_ptr;

/* Print the main program's own program headers as ld.so sees them (from AT_PHDR). */
static int show_first(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        printf("%lu %lu %lu %lu %lu %lu %lu\n", (unsigned long)p->p_type,
               (unsigned long)p->p_offset, (unsigned long)p->p_vaddr,
               (unsigned long)p->p_filesz, (unsigned long)p->p_memsz,
               (unsigned long)p->p_flags, (unsigned long)p->p_align);
    }
    return 1;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "phdrs") == 0) return dl_iterate_phdr(show_first, NULL) == 1 ? 0 : 4;
    int value = demo_answer(argc + 20);
    printf("%s %d\n", demo_name_ptr, value);
    return value == 2 * (argc + 20) + 5 ? 7 : 1;
}
