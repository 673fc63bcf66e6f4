/* The read-only body: rv = the cell as it is (a retransmission of a completed round reads
 * what the round stored; see contributor_bitmap.p4 for what a body is). */
#ifndef P4REDUCE_BODIES_READ_P4
#define P4REDUCE_BODIES_READ_P4
#define READ_BODY rv = value;
#endif
