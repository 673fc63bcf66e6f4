/* 4096 values per block as 64 bit<2048> chunks (include/chunks.p4). */
#define VALUES 4096
#define CHUNKS 64
#include "include/chunks.p4"
