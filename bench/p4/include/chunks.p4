/* Candidate "chunks": the block is CHUNKS separate bit<2048> headers (64 values each, the
 * widest type p4c-bm2-ss accepts) and each chunk has its own register array: CHUNKS
 * read-add-writes per packet, each as wide as the packed encoding's one today. */
#include "headers.p4"
#include "chunk_list.p4"

header chunk_t { bit<2048> word; }

#define CHUNK_HEADER(i) chunk_t c##i;
struct headers_t {
    ethernet_t eth;
    block_t    block;
    FOR_EACH_CHUNK(CHUNK_HEADER)
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
#define CHUNK_EXTRACT(i) pkt.extract(hdr.c##i);
        FOR_EACH_CHUNK(CHUNK_EXTRACT)
        transition accept;
    }
}

control WideIngress(inout headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
#define CHUNK_REGISTER(i) register<bit<2048>>(SLOTS) sums_##i;
    FOR_EACH_CHUNK(CHUNK_REGISTER)

    action add() {
        bit<2048> value;
        bit<32> slot = (bit<32>)hdr.block.slot;
#define CHUNK_ADD(i)                                                           \
        sums_##i.read(value, slot);                                            \
        value = (hdr.block.first == 1) ? hdr.c##i.word : value + hdr.c##i.word;\
        sums_##i.write(slot, value);                                           \
        hdr.c##i.word = value;
        FOR_EACH_CHUNK(CHUNK_ADD)
    }

    apply {
        if (hdr.block.isValid()) {
            add();
        }
        WIDE_FORWARD(standard_metadata)
    }
}

WIDE_MAIN(WideParser, WideIngress)
