// A test wallet, injected into the page before its scripts run (Playwright's add_init_script), registered the
// way a browser extension registers one: the Wallet Standard's own registration protocol (what registerWallet
// of @wallet-standard/wallet does), so the page's code cannot tell it from Phantom. It holds no key: signing
// is done in Python by the test's keypair (window.__testWalletSign and __testWalletSignTransaction, exposed by
// Playwright). With `signIn: true` in window.__TEST_WALLET__ it also offers `solana:signIn` (Sign In With Solana),
// building and checking the message as a real wallet does; without it, it is a wallet that offers none.
(() => {
  const { address, publicKey, signIn } = window.__TEST_WALLET__;
  const chains = ["solana:localnet"];
  const account = Object.freeze({
    address,
    publicKey: new Uint8Array(publicKey),
    chains,
    features: ["solana:signMessage", "solana:signTransaction", ...(signIn ? ["solana:signIn"] : [])],
  });
  let connected = [];
  const listeners = new Set();
  const wallet = {
    version: "1.0.0",
    name: "Test Wallet",
    icon: "data:image/svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciIHZpZXdCb3g9IjAgMCAxNiAxNiI+PHJlY3Qgd2lkdGg9IjE2IiBoZWlnaHQ9IjE2IiBmaWxsPSIjNTU1Ii8+PC9zdmc+",
    chains,
    get accounts() {
      return connected;
    },
    features: {
      "standard:connect": {
        version: "1.0.0",
        connect: async () => {
          connected = [account];
          for (const listener of listeners) listener({ accounts: connected });
          return { accounts: connected };
        },
      },
      "standard:disconnect": {
        version: "1.0.0",
        disconnect: async () => {
          connected = [];
          for (const listener of listeners) listener({ accounts: connected });
        },
      },
      "standard:events": {
        version: "1.0.0",
        on: (event, listener) => {
          if (event !== "change") return () => {};
          listeners.add(listener);
          return () => listeners.delete(listener);
        },
      },
      "solana:signMessage": {
        version: "1.0.0",
        signMessage: async (...inputs) => {
          const outputs = [];
          for (const input of inputs) {
            if (input.account.address !== address) throw new Error("unknown account");
            const signature = await window.__testWalletSign(Array.from(input.message));
            outputs.push({ signedMessage: input.message, signature: new Uint8Array(signature) });
          }
          return outputs;
        },
      },
      "solana:signTransaction": {
        version: "1.0.0",
        supportedTransactionVersions: ["legacy", 0],
        signTransaction: async (...inputs) => {
          const outputs = [];
          for (const input of inputs) {
            if (input.account.address !== address) throw new Error("unknown account");
            if (input.chain !== undefined && !chains.includes(input.chain)) throw new Error(`unsupported chain ${input.chain}`);
            const signed = await window.__testWalletSignTransaction(Array.from(input.transaction));
            outputs.push({ signedTransaction: new Uint8Array(signed) });
          }
          return outputs;
        },
      },
    },
  };
  if (signIn) {
    wallet.features["solana:signIn"] = {
      version: "1.0.0",
      signIn: async (...inputs) => {
        const outputs = [];
        for (const input of inputs) {
          // What a real wallet does (Phantom, Solflare, the Wallet Standard's reference): it fills in the
          // domain and address left out, and refuses a message naming another site than the page asking.
          const filled = { ...input, domain: input.domain ?? location.host, address: input.address ?? address };
          if (filled.domain !== location.host) throw new Error(`sign-in refused: ${filled.domain} is not this site (${location.host})`);
          if (filled.address !== address) throw new Error("unknown account");
          const message = new TextEncoder().encode(signInMessageText(filled));
          const signature = await window.__testWalletSign(Array.from(message));
          connected = [account];
          for (const listener of listeners) listener({ accounts: connected });
          outputs.push({ account, signedMessage: message, signature: new Uint8Array(signature), signatureType: "ed25519" });
        }
        return outputs;
      },
    };
  }

  // createSignInMessageText of @solana/wallet-standard-util 1.1.4 (the text every Wallet Standard wallet signs
  // for solana:signIn), line for line.
  function signInMessageText(input) {
    let message = `${input.domain} wants you to sign in with your Solana account:\n`;
    message += `${input.address}`;
    if (input.statement) message += `\n\n${input.statement}`;
    const fields = [];
    if (input.uri) fields.push(`URI: ${input.uri}`);
    if (input.version) fields.push(`Version: ${input.version}`);
    if (input.chainId) fields.push(`Chain ID: ${input.chainId}`);
    if (input.nonce) fields.push(`Nonce: ${input.nonce}`);
    if (input.issuedAt) fields.push(`Issued At: ${input.issuedAt}`);
    if (input.expirationTime) fields.push(`Expiration Time: ${input.expirationTime}`);
    if (input.notBefore) fields.push(`Not Before: ${input.notBefore}`);
    if (input.requestId) fields.push(`Request ID: ${input.requestId}`);
    if (input.resources) {
      fields.push("Resources:");
      for (const resource of input.resources) fields.push(`- ${resource}`);
    }
    if (fields.length) message += `\n\n${fields.join("\n")}`;
    return message;
  }

  const callback = ({ register }) => register(wallet);
  window.dispatchEvent(new CustomEvent("wallet-standard:register-wallet", { detail: callback }));
  window.addEventListener("wallet-standard:app-ready", ({ detail }) => callback(detail));
})();
