/* 1024 values per block as 16 bit<2048> chunks (include/chunks.p4). */
#define VALUES 1024
#define CHUNKS 16
#include "include/chunks.p4"
