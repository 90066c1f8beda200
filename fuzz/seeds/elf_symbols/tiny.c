/* A small program whose ELF images seed the symboliser's fuzz target: scripts/fuzz.sh
 * builds it with DWARF (-g), stripped (-s) and as a shared object, so the corpus starts from
 * each kind of binary the symboliser meets. */
#include <stdio.h>

static inline int square(int x) { return x * x; }

int leaf(int n) {
    int sum = 0;
    for (int i = 0; i < n; i++) sum += square(i);
    return sum;
}

int middle(int n) { return leaf(n) + leaf(n / 2); }

int main(int argc, char **argv) {
    (void)argv;
    printf("%d\n", middle(argc * 10));
    return 0;
}
