/* 256 values per block as 4 bit<2048> chunks (include/stack.p4). */
#define VALUES 256
#define CHUNKS 4
#include "include/stack.p4"
