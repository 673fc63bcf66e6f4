/* 256 values per block as 4 bit<2048> chunks (include/chunks.p4). */
#define VALUES 256
#define CHUNKS 4
#include "include/chunks.p4"
