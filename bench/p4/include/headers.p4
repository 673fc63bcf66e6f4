/* The headers every wide-block candidate shares (bench/wide_blocks.py, docs/benchmarks.md "Wide
 * blocks: the candidates"): a frame is Ethernet, a 4-byte block header and the block's
 * values (VALUES x 32 bits, big-endian). Only the hot path of p4reduce's aggregation is
 * here -- read the slot's sums, add (the first contributor of a round overwrites), write
 * back, send the sums back out of the ingress port -- so the candidates differ only in how
 * the values are held and added. */
#ifndef WIDE_HEADERS_P4
#define WIDE_HEADERS_P4
#include <core.p4>
#include <v1model.p4>

#define ETHERTYPE_BLOCK 0x88B5
#define SLOTS 32

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

/* slot: the register cell(s) the block adds into; first == 1: the round's first
 * contributor, which overwrites what the slot holds (LANE_UPDATE of p4src); size_class:
 * which values header follows, in the classes candidate (0 = 64 values, 1 = 256, 2 =
 * 1 024, 3 = 2 048, 4 = 4 096); the other candidates have one size and ignore it. */
header block_t {
    bit<16> slot;
    bit<8>  first;
    bit<8>  size_class;
}

/* slot_index: the slot's first register cell, computed once per packet (an index
 * expression would be computed again before every register access); chunks_left: the
 * stack candidate's parser loop counter (softswitch cannot select on a stack's lastIndex,
 * an expression key). */
struct metadata_t {
    bit<32> slot_index;
    bit<8>  chunks_left;
}
#endif
