/* dlopen(argv[1]) and print the program headers ld.so reports for it through
 * dl_iterate_phdr: one line per header "type offset vaddr filesz memsz flags align". */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

static const char *wanted;

static int show(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    if (info->dlpi_name == NULL || strcmp(info->dlpi_name, wanted) != 0) return 0;
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
    if (argc != 2) return 2;
    wanted = argv[1];
    if (dlopen(wanted, RTLD_NOW) == NULL) {
        fprintf(stderr, "%s\n", dlerror());
        return 3;
    }
    return dl_iterate_phdr(show, NULL) == 1 ? 0 : 4;
}
