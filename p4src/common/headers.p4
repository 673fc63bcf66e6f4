/* Packet headers and metadata, the same for every architecture (v1model/, tna/). The
 * p4reduce_t field list is the same table as hostlib/protocol.py's FIELDS (a test compares
 * them through the compiled JSON). */
#ifndef P4REDUCE_HEADERS_P4
#define P4REDUCE_HEADERS_P4
#include "types.p4"
#include "constants.p4"

header ethernet_t {
    mac_t   dst_addr;
    mac_t   src_addr;
    bit<16> ether_type;
}

header arp_t {
    bit<16> htype;
    bit<16> ptype;
    bit<8>  hlen;
    bit<8>  plen;
    bit<16> oper;
    bit<48> sha;
    bit<32> spa;
    bit<48> tha;
    bit<32> tpa;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
}

header udp_t {
    udp_port_t src_port;
    udp_port_t dst_port;
    bit<16> length;
    bit<16> checksum;
}

/* 20 bytes, big-endian. */
header p4reduce_t {
    protocol_t protocol;    /* PROTOCOL_VERSION */
    msg_type_t msg_type;    /* MSG_* */
    version_t slot_version; /* shadow copy: round r uses version r % 2 */
    flags_t flags;          /* FLAG_* */
    job_t   job;            /* job id */
    slot_t  slot;           /* slot index relative to the job's slot range */
    rank_t  rank;           /* sender (worker -> switch) or receiver (switch -> worker) */
    exponent_t next_exponent; /* biased exponent (e + 128) of next_block, 2^e >= max |x| */
    epoch_t epoch;          /* the job's incarnation (admission matches it) */
    block_t block;          /* this round's block (END_OF_STREAM in the announce round) */
    block_t next_block;     /* sender: its next non-zero block in this slot; result: the winner */
}

/* ANNOUNCE and the RESULT of an announce round: what the ranks reduce (dtype, length).
 * A sender puts its own fingerprint in both fields; the result carries the minimum and
 * maximum over the round's ranks, so every rank sees the same disagreement. */
header fingerprint_t {
    fingerprint_value_t fingerprint_min;
    fingerprint_value_t fingerprint_max;
}

/* STATUS: the bitmap of ranks that have contributed to the round so far. */
header round_status_t {
    bitmap_t contributors;
}

/* An architecture may put its own headers first (TNA: the metadata bridged from ingress to
 * egress) by defining P4REDUCE_ARCH_HEADERS before including this file, and carries the
 * values in its own headers, P4REDUCE_ARCH_VALUES (TNA: two adjacent 32-lane headers, the
 * same bytes on the wire as 64 int32; v1model: one word per block size). */
#ifndef P4REDUCE_ARCH_VALUES
#error "define P4REDUCE_ARCH_VALUES (the architecture's values headers) before headers.p4"
#endif
struct headers_t {
#ifdef P4REDUCE_ARCH_HEADERS
    P4REDUCE_ARCH_HEADERS
#endif
    ethernet_t ethernet;
    arp_t      arp;
    ipv4_t     ipv4;
    udp_t      udp;
    p4reduce_t p4r;
    fingerprint_t fingerprint;
    round_status_t round_status;
    P4REDUCE_ARCH_VALUES
}

/* One register cell holding two 32-bit halves: a stateful ALU of a Tofino-class switch
 * updates both at once (lanes, the two versions' bitmaps). v1model keeps it as a bit<64>
 * (hi ++ lo). */
struct pair_t {
    bit<32> lo;
    bit<32> hi;
}

struct metadata_t {
    /* switch identity (SwitchIdentity) */
    mac_t   switch_mac;
    ipv4_addr_t switch_ip;
    /* validation (parser_error / checksum_error: from the architecture's parser) */
    bit<1>  parser_error;
    bit<1>  checksum_error;
    bit<1>  malformed;
    /* admission */
    bit<1>  admitted;
    bit<1>  slot_in_range;
    job_index_t job_index;
    slot_t  slot_base;
    slot_t  slot_count;
    bit<8>  worker_count;
    group_t mcast_grp;
    encoding_t encoding;       /* the job's encoding: ENCODING_LANES or ENCODING_PACKED */
    bit<32> bias;            /* packed jobs: what a rank adds to each lane (floor(M/N)) */
    block_values_t block_values; /* the job's values per block (K) */
    round_mode_t round_mode;   /* the job's rounds: ROUND_MODE_EVERY_RANK or ROUND_MODE_SILENT */
    bit<1>  incarnation_lost;  /* admit_lost: the switch lost the incarnation's state */
    bit<32> pool_slot;
    bit<32> slot_index;      /* pool_slot * 2 + slot_version */
    /* contributor bitmap / round counter */
    epoch_t epoch_lost;        /* hdr.p4r.epoch | EPOCH_LOST */
    epoch_t epoch_on_mismatch; /* what a slot holding another epoch gets: lost if CONTINUED */
    bit<1>  same_epoch;        /* the slot held this packet's epoch */
    bitmap_t rank_bit;         /* 1 << rank */
    bitmap_t others_mask;      /* the job's full mask (one bit per rank) without rank_bit */
    bit<1>  in_round;          /* the packet's block is the one its version's round takes */
    bit<1>  first;           /* first contributor of this round in this version */
    bit<1>  duplicate;       /* sender already counted in this round */
    bit<1>  complete;        /* this packet completed the round */
    bit<1>  round_done;      /* (duplicates) the round was already complete */
    bit<1>  stale;           /* a new contribution the round cannot take: dropped */
    bit<1>  state_lost;      /* the slot lost this job's state (ContributorBitmap) */
    bitmap_t contributors;   /* the version's bitmap after this packet */
    /* values */
    bit<1>  lane_overflow;   /* some lane's partial sum overflowed on this packet */
    bit<1>  round_overflow;
    /* silent rounds (docs/protocol.md section 6): ExpectedRanks, RankNext, Rewind */
    bitmap_t full_mask;        /* the job's full mask: one bit per rank */
    bitmap_t expected;         /* the ranks the packet's round waits for */
    bitmap_t unexpected;       /* the job's ranks it does not wait for (0: every-rank) */
    bit<1>  first_round;       /* an ANNOUNCE that is not CONTINUED: the job's first round */
    bit<32> own_key;           /* the key the packet's version stored (silent): the block of
                                  the other version's round */
    bit<1>  block_matches;     /* the packet's block is its version's round's block */
    bit<1>  other_done;        /* the other version's half holds a complete round */
    bit<1>  query;             /* a SKIP outside the closing round: asks, never contributes */
    bit<1>  closing_answer;    /* a copy or query answered from a closing round: header only */
    bit<1>  rewind_taken;      /* a REWIND whose position joins the slot's pending one */
    bit<1>  rewind_only;       /* ... and that is no closing contribution: consumed */
    block_t rewind_position;   /* the slot's pending rewind position (END_OF_STREAM: none) */
    bit<1>  rewound;           /* the round answers as MSG_REWIND */
    bit<1>  uncovered;         /* a contribution to the round lacked FLAG_COVERED (RankNext) */
    bit<1>  ended;             /* the round ended the slot's call: its RESULT carries FLAG_ENDED */
    bit<32> missing_bias;      /* packed silent data round: the silent ranks' bias */
    bitmap_t next_expected;    /* the ranks the next round expects (RankNext) */
    /* next block */
    bit<32> announced_key;   /* this packet's next_block[23:0] ++ ~next_exponent */
    bit<32> next_key;        /* the round's minimum key: gives next block and exponent */
    bit<32> winner_key;      /* the other version's key: its round's winner once complete */
    /* result: a packet going back to workers (RESULT or STATUS) */
    bit<1>  to_worker;
    bit<1>  multicast;
    rank_t  dest_rank;
    /* drop simulator */
    bit<1>  sim_drop;
    bit<16> sim_egress_threshold;
    bit<32> sim_seed;
    bit<32> sim_sequence;    /* the job's packet sequence number, taken once in ingress */
    bit<1>  sim_random;
#ifdef P4REDUCE_ARCH_METADATA
    P4REDUCE_ARCH_METADATA
#endif
}
#endif
