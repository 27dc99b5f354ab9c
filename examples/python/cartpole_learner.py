"""cartpole_learner.py - a numpy learner trained from hive's env pool and
replay buffer: CartPole-v1 stepped by hive's workers (engine.envpool, the
observations read as zero-copy numpy views), each finished episode's steps
pushed into a hive replay buffer as (obs, action, return-to-go) items, and
a small MLP policy (4-32-2, tanh, softmax) trained by REINFORCE with a
normalised-return baseline and Adam on minibatches sampled from it.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/cartpole_learner.py [--check] [--torch]

Prints env steps/s and the average return of the last 100 episodes as it
learns; stops once that average is >= 195 (CartPole's "solved"). --check
exits 1 if it is not reached within --seconds (default 120). --torch: the
same learner in PyTorch, reading the pool's batches through DLPack.
"""
import argparse
import sys
import time
from collections import deque

import numpy as np

import hive

NUM_ENVS, GAMMA, LR, HIDDEN = 32, 0.99, 0.01, 32
ITEM = np.dtype([("obs", np.float32, 4), ("action", np.float32), ("ret", np.float32)])


class NumpyPolicy:
    def __init__(self, rng):
        self.p = {"w1": rng.normal(0, 0.5, (4, HIDDEN)), "b1": np.zeros(HIDDEN),
                  "w2": rng.normal(0, 0.1, (HIDDEN, 2)), "b2": np.zeros(2)}
        self.m = {k: np.zeros_like(v) for k, v in self.p.items()}
        self.v = {k: np.zeros_like(v) for k, v in self.p.items()}
        self.t = 0

    def probs(self, obs):
        h = np.tanh(obs @ self.p["w1"] + self.p["b1"])
        z = h @ self.p["w2"] + self.p["b2"]
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return h, e / e.sum(axis=1, keepdims=True)

    def act(self, obs, rng):
        _, pr = self.probs(np.asarray(obs, np.float64))
        return (rng.random(len(pr)) < pr[:, 1]).astype(np.int32)

    def update(self, obs, actions, adv):
        h, pr = self.probs(obs)
        dz = pr.copy()                                  # d(-log pi(a)) / dz = pi - onehot(a)
        dz[np.arange(len(actions)), actions] -= 1.0
        dz *= adv[:, None] / len(actions)
        dh = (dz @ self.p["w2"].T) * (1 - h * h)
        grads = {"w2": h.T @ dz, "b2": dz.sum(0), "w1": obs.T @ dh, "b1": dh.sum(0)}
        self.t += 1
        for k, g in grads.items():                     # Adam
            self.m[k] = 0.9 * self.m[k] + 0.1 * g
            self.v[k] = 0.999 * self.v[k] + 0.001 * g * g
            mh, vh = self.m[k] / (1 - 0.9 ** self.t), self.v[k] / (1 - 0.999 ** self.t)
            self.p[k] -= LR * mh / (np.sqrt(vh) + 1e-8)


class TorchPolicy:
    def __init__(self, seed):
        import torch
        self.torch = torch
        torch.manual_seed(seed)
        self.net = torch.nn.Sequential(torch.nn.Linear(4, HIDDEN), torch.nn.Tanh(),
                                       torch.nn.Linear(HIDDEN, 2))
        self.opt = torch.optim.Adam(self.net.parameters(), lr=LR)

    def act(self, obs, rng):
        t = self.torch.from_dlpack(obs)                 # the pool's batch, no copy
        with self.torch.no_grad():
            pr = self.torch.softmax(self.net(t), dim=1)[:, 1].numpy()
        return (rng.random(len(pr)) < pr).astype(np.int32)

    def update(self, obs, actions, adv):
        torch = self.torch
        logp = torch.log_softmax(self.net(torch.from_numpy(obs.astype(np.float32))), dim=1)
        a = torch.from_numpy(actions.astype(np.int64))
        loss = -(logp[torch.arange(len(a)), a] * torch.from_numpy(adv.astype(np.float32))).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()


def returns_to_go(rewards):
    g, out = 0.0, np.empty(len(rewards), np.float32)
    for i in range(len(rewards) - 1, -1, -1):
        g = rewards[i] + GAMMA * g
        out[i] = g
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true", help="exit 1 unless solved within --seconds")
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--torch", action="store_true", help="the learner in PyTorch via DLPack")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    policy = TorchPolicy(args.seed) if args.torch else NumpyPolicy(rng)
    start = time.monotonic()
    steps, last_print, solved = 0, start, False
    recent = deque(maxlen=100)
    with hive.Engine(workers=2, store_bytes=64 << 20) as eng:
        pool = eng.envpool("CartPole", NUM_ENVS, seed=args.seed)
        replay = eng.replay(4096, ITEM, seed=args.seed)
        traj = [[] for _ in range(NUM_ENVS)]            # (obs, action, reward) of each env's episode
        fresh = 0
        obs = pool.reset()
        while time.monotonic() - start < args.seconds:
            actions = policy.act(obs, rng)
            prev = obs.copy()                           # the view is rewritten by the next step
            obs, reward, done, _ = pool.step(actions)
            steps += NUM_ENVS
            for i in range(NUM_ENVS):
                traj[i].append((prev[i], actions[i], reward[i]))
                if done[i]:
                    ep = traj[i]
                    traj[i] = []
                    recent.append(len(ep))
                    items = np.empty(len(ep), ITEM)
                    items["obs"] = [s[0] for s in ep]
                    items["action"] = [s[1] for s in ep]
                    items["ret"] = returns_to_go([s[2] for s in ep])
                    replay.push(items)
                    fresh += len(ep)
            if fresh >= 2048:                            # about one buffer of new steps: learn
                fresh = 0
                for _ in range(4):
                    batch, _, _ = replay.sample(1024)
                    ret = batch["ret"].astype(np.float64)
                    adv = (ret - ret.mean()) / (ret.std() + 1e-8)
                    policy.update(batch["obs"].astype(np.float64), batch["action"].astype(np.int64), adv)
            now = time.monotonic()
            avg = float(np.mean(recent)) if recent else 0.0
            if len(recent) == 100 and avg >= 195:
                solved = True
            if now - last_print >= 2 or solved:
                last_print = now
                print(f"{now - start:6.1f} s  {steps / (now - start):9.0f} steps/s  "
                      f"average return {avg:6.1f} over {len(recent)} episodes", flush=True)
            if solved:
                break
        del obs, reward, done
        pool.close()
        replay.close()
    print(("solved" if solved else "not solved") + f" in {time.monotonic() - start:.1f} s, "
          f"{steps} env steps")
    return 0 if solved or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
