/* The controls every wide-block candidate shares once it has defined headers_t: no
 * checksums, no egress work, every valid header emitted (include/headers.p4 says why the
 * candidates are this small). */
#ifndef WIDE_CONTROLS_P4
#define WIDE_CONTROLS_P4
#include "headers.p4"

control WideVerifyChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }
control WideEgress(inout headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) { apply { } }
control WideComputeChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }
control WideDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }

/* A frame that is not a block is dropped; a block goes back out of its ingress port. */
#define WIDE_FORWARD(STD)                                                      \
    if (hdr.block.isValid()) {                                                 \
        STD.egress_spec = STD.ingress_port;                                    \
    } else {                                                                   \
        mark_to_drop(STD);                                                     \
    }

#define WIDE_MAIN(PARSER, INGRESS)                                             \
    V1Switch(PARSER(), WideVerifyChecksum(), INGRESS(), WideEgress(),          \
             WideComputeChecksum(), WideDeparser()) main;
#endif
