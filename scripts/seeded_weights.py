"""What the peer scripts that make fixture checkpoints share (scripts/st-modern.py, scripts/pylate-peer.py): weights
drawn from a seed, away from their defaults."""
import torch


def perturb(model, seed):
    """Weights drawn from `seed`: norms away from 1 and 0, the rest scaled up so that small differences show."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in sorted(model.named_parameters()):
            noise = torch.rand(parameter.shape, generator=generator) - 0.5
            if "norm" in name.lower() and name.endswith("weight"):
                parameter.copy_(1.0 + 0.5 * noise)
            elif name.endswith("bias"):
                parameter.copy_(0.2 * noise)
            else:
                parameter.copy_(0.4 * noise)
    return model
