/* 64 values per block as one bit<2048> word (include/wide.p4): the widest p4c-bm2-ss
 * compiles. */
#define VALUES 64
#define WIDTH 2048
#include "include/wide.p4"
