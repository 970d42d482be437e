/* The checks across [model] keys (see model_shape.h).  The messages are
 * the configuration's: a manifest's reader prefixes the field it found
 * wrong and gives its own hint. */
#include "config/model_shape.h"

#include <stdio.h>
#include <string.h>

int st_model_shape_problem(const st_model_config *m, st_shape_problem *p)
{
    memset(p, 0, sizeof *p);
    if (m->d_model % m->n_head) {
        *p = (st_shape_problem){"n_head", "d_model", "", "hint: pick n_head dividing d_model"};
        snprintf(p->what, sizeof p->what, "model.d_model = %lld is not divisible by "
                 "model.n_head = %lld", (long long)m->d_model, (long long)m->n_head);
    } else if (m->n_head % m->n_kv_head) {
        *p = (st_shape_problem){"n_kv_head", "n_head", "",
                                "hint: pick n_kv_head dividing n_head"};
        snprintf(p->what, sizeof p->what, "model.n_head = %lld is not divisible by "
                 "model.n_kv_head = %lld", (long long)m->n_head, (long long)m->n_kv_head);
    } else if (m->arch == ST_ARCH_GPT2 && m->n_kv_head != m->n_head) {
        *p = (st_shape_problem){"n_kv_head", "arch", "",
                                "hint: remove n_kv_head or use arch = llama for "
                                "grouped-query attention"};
        snprintf(p->what, sizeof p->what, "arch gpt2 needs model.n_kv_head = model.n_head "
                 "(got %lld and %lld)", (long long)m->n_kv_head, (long long)m->n_head);
    } else if (m->arch == ST_ARCH_LLAMA && (m->d_model / m->n_head) % 2) {
        *p = (st_shape_problem){"n_head", "d_model", "",
                                "hint: RoPE (arch llama) needs an even head dimension"};
        snprintf(p->what, sizeof p->what, "head dimension d_model/n_head = %lld is odd",
                 (long long)(m->d_model / m->n_head));
    } else if (m->rope_scaling == ST_ROPE_LLAMA3 && m->arch != ST_ARCH_LLAMA) {
        *p = (st_shape_problem){"rope_scaling", "arch", "", "hint: remove rope_scaling"};
        snprintf(p->what, sizeof p->what, "model.rope_scaling = llama3 needs arch llama "
                 "(GPT-2 has no RoPE)");
    } else if (m->rope_scaling == ST_ROPE_LLAMA3 &&
               m->rope_high_freq_factor <= m->rope_low_freq_factor) {
        *p = (st_shape_problem){"rope_high_freq_factor", "rope_low_freq_factor", "",
                                "hint: llama3 scaling interpolates between them (Llama 3.1: "
                                "4 and 1)"};
        snprintf(p->what, sizeof p->what, "model.rope_high_freq_factor = %g is not above "
                 "model.rope_low_freq_factor = %g", m->rope_high_freq_factor,
                 m->rope_low_freq_factor);
    }
    return p->key != NULL;
}
