/* Candidate "wide": the whole block is one bit<WIDTH> field (WIDTH = VALUES x 32) and each
 * slot one bit<WIDTH> register cell: one read-add-write per packet, whatever the block
 * size. p4c-bm2-ss refuses any type wider than 2048 bits ("Compiler only supports widths up
 * to 2048"), so only VALUES = 64 compiles; bench/wide_blocks.py widens that program's JSON
 * to measure what bmv2 and softswitch would do with a wider one. */
#include "headers.p4"

header values_t { bit<WIDTH> word; }

struct headers_t {
    ethernet_t eth;
    block_t    block;
    values_t   values;
}

#include "controls.p4"

parser WideParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) {
            ETHERTYPE_BLOCK: block;
            default: accept;
        }
    }
    state block {
        pkt.extract(hdr.block);
        pkt.extract(hdr.values);
        transition accept;
    }
}

control WideIngress(inout headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    register<bit<WIDTH>>(SLOTS) sums;

    /* read, add into the header (the sum goes out in it), write it back: three
     * primitives */
    action add() {
        bit<WIDTH> stored;
        sums.read(stored, meta.slot_index);
        hdr.values.word = (hdr.block.first == 1) ? hdr.values.word
                                                 : stored + hdr.values.word;
        sums.write(meta.slot_index, hdr.values.word);
    }

    apply {
        if (hdr.block.isValid()) {
            meta.slot_index = (bit<32>)hdr.block.slot;
            add();
        }
        WIDE_FORWARD(standard_metadata)
    }
}

WIDE_MAIN(WideParser, WideIngress)
