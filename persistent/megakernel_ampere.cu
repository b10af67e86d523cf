/*
 * megakernel_ampere.cu -- the persistent megakernel running the Ampere Atom on the
 * throughput path (one file per Atom so that their instantiations compile
 * in parallel).
 */
#include "persistent/megakernel.cuh"

void (*purlinMegakernelAmpere(void))(purlinDevComm_t*) { return purlinMegakernel<purlinAtomAmpereT>; }
