import time
import torch
from torch import nn
from torch.utils.data import Dataset, DataLoader

class SlowDataset(Dataset):
    """Each sample costs 5 ms - a stand-in for JPEG decode + augmentation."""
    def __len__(self):
        return 256

    def __getitem__(self, idx):
        time.sleep(0.005)
        return torch.rand(3, 32, 32), idx % 2

def profile_epoch(loader, model, opt, loss_fn):
    wait, compute = 0.0, 0.0
    mark = time.perf_counter()
    for x, y in loader:                  # time spent on this line = waiting for data
        wait += time.perf_counter() - mark
        mark = time.perf_counter()
        opt.zero_grad()
        loss_fn(model(x.flatten(1)), y).backward()
        opt.step()
        compute += time.perf_counter() - mark
        mark = time.perf_counter()
    return wait, compute

if __name__ == "__main__":
    model = nn.Sequential(nn.Linear(3 * 32 * 32, 128), nn.ReLU(), nn.Linear(128, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    for workers in [0, 4]:
        loader = DataLoader(SlowDataset(), batch_size=32, num_workers=workers,
                            persistent_workers=workers > 0)
        profile_epoch(loader, model, opt, loss_fn)     # warm-up: pays worker start-up once
        wait, compute = profile_epoch(loader, model, opt, loss_fn)
        print(f"num_workers={workers}: epoch {wait + compute:.2f} s "
              f"(waiting {wait:.2f} s, computing {compute:.2f} s)")
