// bertfit kernels: <op>_forward / <op>_backward pairs on raw fp32 arrays, shared by training
// and inference. Letters: N token rows (B·T when padded), B batch, T tokens per sequence,
// C channels, H heads, D = C/H head size, I intermediate size, V vocab, K labels.
//
// THE ONE RULE: every backward kernel ACCUMULATES (+=) into every gradient it writes, input
// gradients and parameter gradients alike. Callers zero gradient buffers before a step.
// Forward kernels overwrite their outputs. Kernels know nothing of models, oneDNN or MPI.
// Every kernel here has a scalar double-precision reference in kernels/ref/ and a
// finite-difference test.
#pragma once

#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/cast.h"
#include "kernels/dropout.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/layernorm.h"
#include "kernels/loss.h"
#include "kernels/optimizer.h"
