"""Generated launch-platform traffic for the local chain: pump.fun-shaped transactions.

This is GENERATED traffic, not recorded mainnet data. A seeded random stream of coin creations, trades and
graduations is built here and handed to the chain as `InjectedTransaction`s, so that signals, webhooks,
log subscriptions and the gRPC stream have launch-platform traffic offline.

What is real:
  * program ids, PDAs and every derived address (bonding curves, associated token accounts, creator
    vaults, event authorities, PumpSwap pools and LP mints) — derived exactly as on mainnet;
  * instruction data (Anchor discriminators + Borsh args) and account orders of pump `create`, `create_v2`,
    `buy`, `sell`, `migrate` and PumpSwap `create_pool` (the inner CPI of `migrate`, as on mainnet);
  * account layouts: pump BondingCurve (150 bytes, documented offsets) and Global, PumpSwap Pool, SPL mints
    (82 bytes) and token accounts (165 bytes), Token-2022 mints with MetadataPointer + TokenMetadata and
    Token-2022 token accounts with ImmutableOwner;
  * Anchor events (CreateEvent, TradeEvent, CompleteEvent, CompletePumpAmmMigrationEvent, CreatePoolEvent)
    as `emit_cpi!` self-CPIs in the inner instructions and as `Program data:` log lines;
  * the curve math (integers, `pumpfun.curve`) that sets every amount and reserve, at the fee rates and
    to the fee recipients of the `Global` account the feed writes (`pumpfun.fees`: protocol 95 + creator 30 bps);
  * the transactions themselves: v0 messages compiled against the chain's latest blockhash and really
    signed by generated keypairs (fee payer = the user; the mint keypair also signs creates).

What is synthetic:
  * the pump, PumpSwap, Metaplex and mayhem programs are NOT executed: their effects are computed here
    and the resulting account states are written directly (`account_writes`); logs, inner instructions
    and compute units describe what the programs would have done (figures are typical, not measured);
  * wallets, coin names, symbols and metadata URIs, amounts, timing and priority fees are random draws
    from a `random.Random(seed)`; mints are plain generated keypairs (no "...pump" vanity suffix);
  * accounts the stream does not need are not written: Metaplex metadata, user/global volume
    accumulators, bonding_curve_v2, mayhem state, fee config;
  * coins with a quote mint of their own are created (create_v2 with the quote remaining accounts) but never
    traded by the feed (their trades are buy_v2/sell_v2, which the devnode executes when users sign them:
    devnode/pump_exec/pump_v2.py): USDC coins, and curves whose quote mint is wrapped SOL. The latter are the
    devnode's stand-in for mainnet's quote-mint coins in a currency every test wallet has (on mainnet a coin
    created with wrapped SOL as the explicit quote is a SOL coin, and the feed makes those too: `quote_mint`
    stays `Pubkey::default()`, as the docs say, and they trade like any SOL coin);
  * the USDC curve's initial virtual quote reserves are an assumption (`USDC_INITIAL_VIRTUAL_QUOTE_RESERVES`);
  * graduation: `migrate`'s 24-account order comes from public copies of the pump IDL (it is not in the
    reference); for Token-2022 coins SPL Token is appended as a remaining account (see `migrate_accounts`);
    the LP mint's 9 decimals and the migration fee going to `Global.withdraw_authority` are assumptions;
  * no mayhem-mode or cashback coins, buyback fee 0; the `Global` account (`state.PUMP_GLOBAL`: documented
    example values, fees 95 + 30 bps, the published fee and buyback recipients) is written by the first
    transaction of each run;
  * traders are funded by one airdrop each, plus another whenever one falls below 100 SOL; a restarted feed
    keeps the seed's wallets and launches new coins: the devnode counts the feed's starts in
    <data_dir>/feed.json and each start is a new run of the seed (`state.run_seed`), and a mint that already
    has an account on the chain is never drawn (`FeedState.new_mint`). The coins of an earlier run are not
    traded by the feed again (it keeps no memory of them).

Trades users sign on the feed's coins are executed by the devnode (devnode/pump_exec/); the chain tells the feed
of every transaction it did not make, and the feed reads the accounts those changed back before its next step
(`FeedState.refresh`), so it trades on from the curves, balances and token amounts they left.

Layout: `launch` runs the stream (`LaunchFeed`, the entry point), `state` holds the wallets and the feed's
view of their accounts, `create`, `trade` and `migrate` build each kind of transaction, and `assemble`
signs one and turns it into the `InjectedTransaction` the chain records.
"""

from devnode.feed.launch import LaunchFeed

__all__ = ["LaunchFeed"]
