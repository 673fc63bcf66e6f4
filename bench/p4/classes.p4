/* Every block size in one program, the size chosen per packet (include/classes.p4). */
#include "include/classes.p4"
