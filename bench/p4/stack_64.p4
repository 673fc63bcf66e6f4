/* 64 values per block as 1 bit<2048> chunks (include/stack.p4). */
#define VALUES 64
#define CHUNKS 1
#include "include/stack.p4"
