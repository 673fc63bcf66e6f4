/* 2048 values per block as 32 bit<2048> chunks (include/stack.p4). */
#define VALUES 2048
#define CHUNKS 32
#include "include/stack.p4"
