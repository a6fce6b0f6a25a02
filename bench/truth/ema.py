"""diffusers' EMAModel, the parts a training loop with EMA validation calls, as diffusers writes
them (src/diffusers/training_utils.py, class EMAModel; huggingface/diffusers at commit
58eb52c0803ea9af3abec60841c2a093bdf1f951; store()/restore() since v0.13.0). Copied rather than
imported so the truth venv needs no diffusers; only the default path (foreach=False, no
DeepSpeed, no warmup) is kept. Apache License 2.0, Copyright The HuggingFace Team.

What each call allocates, which membudget's --ema / --ema-swap model:
  __init__   shadow_params = [p.clone().detach() for p in parameters]: a copy of every
             parameter, kept (membudget's --ema: setup, category "ema")
  step       s_param.sub_(one_minus_decay * (s_param - param)) per parameter: two
             parameter-sized temporaries at a time (not modelled by membudget)
  store      temp_stored_params = [param.detach().cpu().clone() for param in parameters]: on
             a CUDA model a host copy; on a CPU model a device copy, kept until restore()
  copy_to    param.data.copy_(s_param.to(param.device).data): in place (shadows on the device)
  restore    param.data.copy_(c_param.data), then temp_stored_params = None
"""
import torch


class EMAModel:
    def __init__(self, parameters, decay=0.9999, min_decay=0.0, update_after_step=0):
        parameters = list(parameters)
        self.shadow_params = [p.clone().detach() for p in parameters]
        self.temp_stored_params = None
        self.decay = decay
        self.min_decay = min_decay
        self.update_after_step = update_after_step
        self.optimization_step = 0
        self.cur_decay_value = None

    def get_decay(self, optimization_step):
        step = max(0, optimization_step - self.update_after_step - 1)
        if step <= 0:
            return 0.0
        cur_decay_value = (1 + step) / (10 + step)
        cur_decay_value = min(cur_decay_value, self.decay)
        return max(cur_decay_value, self.min_decay)

    @torch.no_grad()
    def step(self, parameters):
        parameters = list(parameters)
        self.optimization_step += 1
        decay = self.get_decay(self.optimization_step)
        self.cur_decay_value = decay
        one_minus_decay = 1 - decay
        for s_param, param in zip(self.shadow_params, parameters):
            if param.requires_grad:
                s_param.sub_(one_minus_decay * (s_param - param))
            else:
                s_param.copy_(param)

    def copy_to(self, parameters):
        parameters = list(parameters)
        for s_param, param in zip(self.shadow_params, parameters):
            param.data.copy_(s_param.to(param.device).data)

    def store(self, parameters):
        self.temp_stored_params = [param.detach().cpu().clone() for param in parameters]

    def restore(self, parameters):
        if self.temp_stored_params is None:
            raise RuntimeError("This ExponentialMovingAverage has no `store()`ed weights to `restore()`")
        for c_param, param in zip(self.temp_stored_params, parameters):
            param.data.copy_(c_param.data)
        self.temp_stored_params = None
