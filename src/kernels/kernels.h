// bertfit kernels: <op>_forward / <op>_backward pairs on raw fp32 arrays, shared by training
// and inference. Letters: N token rows (B·T when padded), B batch, T tokens per sequence,
// C channels, H heads, D = C/H head size, I intermediate size, V vocab, K labels.
//
// Output contract, stated per kernel in its header: forward kernels overwrite their outputs;
// parameter gradients are always accumulated (+=), so a step's gradient buffer is zeroed once
// and micro-batches sum into it; an input gradient is accumulated where several terms meet
// (attention's dqkv, activation_backward's dx, the rows scattered by scatter_add_rows) and
// written where the kernel's term is the only one (layernorm_backward's and dropout_backward's
// dx), which saves zeroing it. Kernels know nothing of models, oneDNN or MPI.
// Every kernel here has a scalar double-precision reference in kernels/ref/ and a
// finite-difference test.
#pragma once

#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/attention_blockwise.h"
#include "kernels/cast.h"
#include "kernels/dropout.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/layernorm.h"
#include "kernels/loss.h"
#include "kernels/optimizer.h"
#include "kernels/rotary.h"
