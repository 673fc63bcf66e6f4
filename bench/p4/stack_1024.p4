/* 1024 values per block as 16 bit<2048> chunks (include/stack.p4). */
#define VALUES 1024
#define CHUNKS 16
#include "include/stack.p4"
